#include <bits/stdc++.h>
using namespace std;
int main() { int n; cin >> n; if (n > 3) throw runtime_error("too many"); set<int> s; while (n--) { int x; cin >> x; s.insert(x); } cout << s.size() << endl; }
