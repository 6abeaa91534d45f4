#include <bits/stdc++.h>
using namespace std;
int main() { int n; cin >> n; vector<int> v(n); for (auto& x : v) cin >> x; sort(v.rbegin(), v.rend()); for (int x : v) cout << x << ' '; }
