#include <bits/stdc++.h>
using namespace std;
int main() { long long n; cin >> n; const long long M = 1e9 + 7; long long s = 0; for (long long i = 1; i <= n; i++) { s += i % M; if (s >= M) s -= M; } cout << s << endl; }
