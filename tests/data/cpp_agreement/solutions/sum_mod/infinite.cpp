#include <bits/stdc++.h>
using namespace std;
int main() { long long n; cin >> n; volatile long long s = 0; while (true) s += n; }
