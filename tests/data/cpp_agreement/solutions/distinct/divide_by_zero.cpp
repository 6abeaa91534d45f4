#include <bits/stdc++.h>
using namespace std;
int main() { int n; cin >> n; volatile int z = n - n; cout << n / z << endl; }
