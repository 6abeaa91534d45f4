#include <bits/stdc++.h>
using namespace std;
int main() { int n; cin >> n; vector<int> v(n); for (auto& x : v) cin >> x; for (int i = 0; i < n; i++) for (int j = 0; j + 1 < n - i; j++) if (v[j] > v[j+1]) swap(v[j], v[j+1]); for (int x : v) cout << x << (char)10; }
