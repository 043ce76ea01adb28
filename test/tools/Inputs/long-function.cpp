// Input of source-sizes.test: a function over a 3-line limit, one under,
// one on a single line.

int tooLong(int x) {
  int y = x + 1;
  y *= 2;
  return y;
}

int short(int x) {
  return x;
}
int oneLine(int x) { return x; }
