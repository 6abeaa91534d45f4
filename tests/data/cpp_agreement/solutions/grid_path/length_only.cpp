// Prints only the length: no path.
#include <bits/stdc++.h>
using namespace std;
int main() {
  int h, w; cin >> h >> w; vector<string> g(h); for (auto& r : g) cin >> r;
  vector<vector<int>> d(h, vector<int>(w, -1)); deque<pair<int,int>> q; d[0][0] = 0; q.push_back({0, 0});
  int dr[] = {1, -1, 0, 0}, dc[] = {0, 0, 1, -1};
  while (!q.empty()) { auto [r, c] = q.front(); q.pop_front();
    for (int k = 0; k < 4; k++) { int nr = r + dr[k], nc = c + dc[k];
      if (nr >= 0 && nr < h && nc >= 0 && nc < w && g[nr][nc] == '.' && d[nr][nc] < 0) { d[nr][nc] = d[r][c] + 1; q.push_back({nr, nc}); } } }
  cout << d[h-1][w-1] << endl;
}
