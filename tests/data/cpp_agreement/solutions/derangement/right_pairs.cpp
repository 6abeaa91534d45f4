#include <bits/stdc++.h>
using namespace std;
int main() { int n; cin >> n; if (n == 1) { cout << -1; return 0; } vector<int> p(n + 1); for (int i = 1; i + 1 <= n; i += 2) { p[i] = i + 1; p[i + 1] = i; } if (n % 2) { p[n] = p[n - 1]; p[n - 1] = n; } for (int i = 1; i <= n; i++) cout << p[i] << "\n"; }
