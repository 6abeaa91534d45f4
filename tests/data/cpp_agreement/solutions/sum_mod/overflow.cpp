#include <bits/stdc++.h>
using namespace std;
int main() { long long n; cin >> n; cout << n * (n + 1) / 2 % 1000000007 << endl; }
