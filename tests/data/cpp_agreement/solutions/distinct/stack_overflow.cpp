#include <bits/stdc++.h>
using namespace std;
int f(int n) { volatile char pad[4096]; pad[0] = n; return n == 0 ? 0 : f(n - 1) + pad[0] % 2; }
int main() { int n; cin >> n; cout << f(100000000) + n << endl; }
