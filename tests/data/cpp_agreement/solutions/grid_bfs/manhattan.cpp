#include <bits/stdc++.h>
using namespace std;
int main() { int h, w; cin >> h >> w; cout << h + w - 2 << endl; }
