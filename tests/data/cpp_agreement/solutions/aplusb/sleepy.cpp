#include <bits/stdc++.h>
using namespace std;
int main() { long long a, b; cin >> a >> b; this_thread::sleep_for(chrono::seconds(30)); cout << a + b; }
