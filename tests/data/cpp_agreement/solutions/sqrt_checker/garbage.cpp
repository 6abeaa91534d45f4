#include <bits/stdc++.h>
using namespace std;
int main() { double a; cin >> a; puts("sqrt"); }
