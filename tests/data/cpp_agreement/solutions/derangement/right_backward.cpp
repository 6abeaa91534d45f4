#include <bits/stdc++.h>
using namespace std;
int main() { int n; cin >> n; if (n == 1) { puts("-1"); return 0; } printf("%d", n); for (int i = 1; i < n; i++) printf(" %d", i); puts(""); }
