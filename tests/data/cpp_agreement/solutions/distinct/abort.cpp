#include <bits/stdc++.h>
using namespace std;
int main() { int n; cin >> n; assert(n < 5); cout << n << endl; }
