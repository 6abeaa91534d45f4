#include <bits/stdc++.h>
using namespace std;
int main() { long long n; cin >> n; vector<long long> v; v.reserve(n); for (long long i = 1; i <= n; i++) v.push_back(i % 1000000007); long long s = 0; for (auto x : v) s = (s + x) % 1000000007; cout << s << endl; }
