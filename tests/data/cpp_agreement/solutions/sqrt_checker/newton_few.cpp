#include <bits/stdc++.h>
using namespace std;
int main() { double a; cin >> a; double x = a; for (int i = 0; i < 3; i++) x = (x + a / x) / 2; printf("%.12f\n", x); }
