#include <bits/stdc++.h>
using namespace std;
int main() { double a; cin >> a; printf("%.12f\n", sqrt(a)); }
