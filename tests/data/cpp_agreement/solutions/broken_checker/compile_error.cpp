int main() { return x; }
