#include <bits/stdc++.h>
using namespace std;
int main() { int n; cin >> n; int* v = nullptr; if (n > 5) { *(volatile int*)v = 1; } vector<int> w(n); for (auto& x : w) cin >> x; sort(w.begin(), w.end()); for (int x : w) cout << x << ' '; }
