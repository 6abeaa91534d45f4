#include <bits/stdc++.h>
using namespace std;
int main() { int n, q; cin >> n >> q; vector<long long> a(n); for (auto& x : a) cin >> x; while (q--) { int l, r; cin >> l >> r; long long s = 0; for (int i = l - 1; i < r; i++) s += a.at(i + 1); cout << s << '\n'; } }
