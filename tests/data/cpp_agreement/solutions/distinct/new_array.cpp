#include <bits/stdc++.h>
using namespace std;
int main() { int n; cin >> n; long long* a = new long long[1LL << 30]; a[0] = n; set<int> s; while (n--) { int x; cin >> x; s.insert(x); } cout << s.size() + a[0] - a[0] << endl; }
