#include <bits/stdc++.h>
using namespace std;
int main() { float r; cin >> r; float a = 3.14159265f * r * r; printf("%.10f\n", a); }
