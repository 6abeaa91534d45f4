#include <bits/stdc++.h>
using namespace std;
int main() { int n; cin >> n; vector<bool> seen(1000000001); vector<int> big(100000000, 1); int c = 0; while (n--) { int x; cin >> x; if (!seen[x]) { seen[x] = true; c++; } } cout << c + big[5] - 1 << endl; }
