// checker input output answer: the output's length equals the answer's (the shortest), and, unless it is -1, the
// next token is a path of that many U/D/L/R moves over '.' cells from the top-left to the bottom-right cell.
// Exit 0 accepted, 1 wrong answer, 2 presentation error.
#include "grid.h"
using namespace std;
int main(int argc, char** argv) {
  if (argc != 4) return 3;
  Grid grid = read_grid(argv[1]);
  ifstream out(argv[2]), ans(argv[3]);
  long long best; ans >> best;
  string first; if (!(out >> first)) return 2;
  long long got; try { size_t used; got = stoll(first, &used); if (used != first.size()) return 2; } catch (...) { return 2; }
  if (got != best) return 1;
  if (best == -1) return 0;
  string path; if (best > 0 && !(out >> path)) return 2;
  string extra; if (out >> extra) return 2;
  if ((long long)path.size() != best) return 1;
  int r = 0, c = 0;
  for (char m : path) {
    if (m == 'U') r--; else if (m == 'D') r++; else if (m == 'L') c--; else if (m == 'R') c++; else return 2;
    if (r < 0 || r >= grid.h || c < 0 || c >= grid.w || grid.g[r][c] != '.') return 1;
  }
  return r == grid.h - 1 && c == grid.w - 1 ? 0 : 1;
}
