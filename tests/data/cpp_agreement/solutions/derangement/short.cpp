#include <bits/stdc++.h>
using namespace std;
int main() { int n; cin >> n; if (n == 1) { cout << -1; return 0; } for (int i = 2; i <= n; i++) cout << i << ' '; }
