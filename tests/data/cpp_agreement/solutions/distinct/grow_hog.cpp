#include <bits/stdc++.h>
using namespace std;
int main() { int n; cin >> n; vector<long long> v; for (;;) v.push_back(n); }
