#include <bits/stdc++.h>
using namespace std;
int main() { double r; cin >> r; cout << setprecision(12) << M_PI * r * r << endl; }
