// Shared by checkers: read a grid problem's input.
#include <bits/stdc++.h>
struct Grid { int h = 0, w = 0; std::vector<std::string> g; };
inline Grid read_grid(const char* path) {
  std::ifstream in(path); Grid grid; in >> grid.h >> grid.w; grid.g.resize(grid.h);
  for (auto& row : grid.g) in >> row;
  return grid;
}
