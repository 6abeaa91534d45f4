#include <bits/stdc++.h>
using namespace std;
int main() { long long n; cin >> n; const long long M = 1e9 + 7; n %= M; cout << n * ((n + 1) % M) % M * 500000004 % M << endl; }
