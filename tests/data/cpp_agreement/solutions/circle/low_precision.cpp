#include <bits/stdc++.h>
using namespace std;
int main() { double r; cin >> r; printf("%.2f\n", acos(-1.0) * r * r); }
