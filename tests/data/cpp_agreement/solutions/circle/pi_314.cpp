#include <bits/stdc++.h>
using namespace std;
int main() { double r; cin >> r; printf("%.10f\n", 3.14 * r * r); }
