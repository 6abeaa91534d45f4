#include <bits/stdc++.h>
using namespace std;
int main() { string s; cin >> s; cout << s << endl; for (int i = 0; i < 1000; i++) cerr << "debug " << i << '\n'; }
