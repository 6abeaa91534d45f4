"""deploy/k8s: every manifest valid against the Kubernetes API's own schemas (kubernetes-validate, offline, strict:
an unknown field is an error), and the settings the sandbox depends on, kept. No cluster can run here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.conftest import ROOT
from verifier_service.settings import NOT_SERVICE_SETTINGS, setting_names

K8S = ROOT / "deploy" / "k8s"
VERSION = "1.33.0"  # the first with user namespaces (hostUsers: false) on by default
DEPLOYMENTS = {"bubblewrap": K8S / "deployment.yaml", "gvisor": K8S / "deployment-gvisor.yaml"}


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def container(kind: str) -> dict[str, Any]:
    [deployment] = documents(DEPLOYMENTS[kind])
    [verifier] = deployment["spec"]["template"]["spec"]["containers"]
    return verifier


def pod(kind: str) -> dict[str, Any]:
    [deployment] = documents(DEPLOYMENTS[kind])
    return deployment["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def env(kind: str) -> dict[str, str | None]:
    return {var["name"]: var.get("value") for var in container(kind)["env"]}


@pytest.mark.parametrize("path", sorted(K8S.glob("*.yaml")), ids=lambda p: p.name)
def test_every_manifest_is_valid_for_the_api(path: Path) -> None:
    for doc in documents(path):
        kubernetes_validate.validate(doc, VERSION, strict=True)  # raises ValidationError


def test_the_validator_refuses_what_the_api_would() -> None:
    """The check above can fail: a misspelt field, and a wrong type, are refused."""
    [deployment] = documents(DEPLOYMENTS["bubblewrap"])
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]["procMounts"] = "Unmasked"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, VERSION, strict=True)
    [deployment] = documents(DEPLOYMENTS["bubblewrap"])
    deployment["spec"]["template"]["spec"]["hostUsers"] = "false"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, VERSION, strict=True)


def test_the_bubblewrap_pod_gets_what_bubblewrap_needs_and_no_more() -> None:
    spec, box = pod("bubblewrap"), container("bubblewrap")["securityContext"]
    assert spec["hostUsers"] is False  # the pod's root is nobody on the node; needed for procMount Unmasked
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 10000
    assert box["allowPrivilegeEscalation"] is False and box["readOnlyRootFilesystem"] is True
    assert box["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in box and "add" not in box["capabilities"]
    assert box["procMount"] == "Unmasked"
    assert box["seccompProfile"] == {"type": "Unconfined"} and box["appArmorProfile"] == {"type": "Unconfined"}
    assert env("bubblewrap")["VERIFIER_SANDBOX__REQUIRE_ISOLATION"] == "true"  # never rlimits only, silently


def test_the_gvisor_pod_is_admissible_under_pod_security_baseline() -> None:
    spec, box = pod("gvisor"), container("gvisor")["securityContext"]
    assert spec["runtimeClassName"] == "gvisor"
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert {"procMount", "seccompProfile", "appArmorProfile", "privileged"}.isdisjoint(box)
    assert box["allowPrivilegeEscalation"] is False and box["capabilities"]["drop"] == ["ALL"]
    # Baseline's allowed additions include these; as root with them, each sandbox gets a uid of its own.
    assert set(box["capabilities"]["add"]) <= {"CHOWN", "KILL", "SETGID", "SETUID"}
    assert spec["securityContext"]["runAsUser"] == 0
    # not the image's entrypoint, which drops root to 10000 (and the sandboxes would share the service's uid)
    assert container("gvisor")["command"] == ["/opt/verifier/bin/python", "-m", "verifier_service"]
    assert env("gvisor")["VERIFIER_SANDBOX__REQUIRE_ISOLATION"] == "false"  # bubblewrap cannot run inside gVisor
    [runtime_class] = documents(K8S / "runtimeclass-gvisor.yaml")
    assert runtime_class["metadata"]["name"] == spec["runtimeClassName"]


@pytest.mark.parametrize("kind", DEPLOYMENTS)
def test_both_pods_run_the_local_backend_probed_on_readyz_and_healthz(kind: str) -> None:
    verifier, variables = container(kind), env(kind)
    assert variables["VERIFIER_SANDBOX_BACKEND"] == "local"  # no Docker socket in a pod
    assert not any(volume.get("hostPath") for volume in pod(kind)["volumes"])
    assert verifier["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert verifier["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert verifier["ports"] == [{"name": "http", "containerPort": 8088}]
    cpus = int(verifier["resources"]["limits"]["cpu"])
    assert variables["VERIFIER_MATH_WORKERS"] == variables["VERIFIER_SANDBOX__POOL_SIZE"] == str(cpus)
    unknown = set(variables) - set(setting_names()) - NOT_SERVICE_SETTINGS
    assert not unknown, f"not settings of the verifier: {unknown}"
    assert pod(kind)["automountServiceAccountToken"] is False


@pytest.mark.parametrize("kind", DEPLOYMENTS)
def test_the_service_autoscaler_and_budget_find_the_pods(kind: str) -> None:
    [deployment] = documents(DEPLOYMENTS[kind])
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service, autoscaler, budget, policy = documents(K8S / "service.yaml")
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    target = autoscaler["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert budget["spec"]["minAvailable"] < autoscaler["spec"]["minReplicas"] <= deployment["spec"]["replicas"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert policy["spec"]["egress"] == [] and "Egress" in policy["spec"]["policyTypes"]  # the pods call nothing
