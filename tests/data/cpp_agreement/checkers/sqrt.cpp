// checker input output answer: the output is one number x with |x*x - a| <= 1e-6 * max(1, a).
// Exit 0 accepted, 1 wrong answer, 2 presentation error.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
int main(int argc, char** argv) {
  if (argc != 4) return 3;
  std::ifstream in(argv[1]), out(argv[2]);
  double a; in >> a;
  std::string token; if (!(out >> token)) return 2;
  double x; try { size_t used; x = std::stod(token, &used); if (used != token.size()) return 2; } catch (...) { return 2; }
  std::string extra; if (out >> extra) return 2;
  return std::fabs(x * x - a) <= 1e-6 * std::fmax(1.0, a) ? 0 : 1;
}
