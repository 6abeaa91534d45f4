#include <bits/stdc++.h>
using namespace std;
int main() {
  int h, w; cin >> h >> w; vector<string> g(h); for (auto& r : g) cin >> r;
  vector<vector<int>> d(h, vector<int>(w, -1)), from(h, vector<int>(w, -1)); deque<pair<int,int>> q; d[0][0] = 0; q.push_back({0, 0});
  int dr[] = {0, 1, 0, -1}, dc[] = {1, 0, -1, 0}; const char* name = "RDLU";
  while (!q.empty()) { auto [r, c] = q.front(); q.pop_front();
    for (int k = 0; k < 4; k++) { int nr = r + dr[k], nc = c + dc[k];
      if (nr >= 0 && nr < h && nc >= 0 && nc < w && g[nr][nc] == '.' && d[nr][nc] < 0) { d[nr][nc] = d[r][c] + 1; from[nr][nc] = k; q.push_back({nr, nc}); } } }
  if (d[h-1][w-1] < 0) { cout << -1 << endl; return 0; }
  string path; int r = h - 1, c = w - 1; while (r || c) { int k = from[r][c]; path += name[k]; r -= dr[k]; c -= dc[k]; }
  reverse(path.begin(), path.end()); cout << d[h-1][w-1] << "\n" << path << "\n";
}
