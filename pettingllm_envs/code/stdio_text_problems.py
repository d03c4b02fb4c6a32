"""The text and formatting problems of the stdin/stdout set written for this project
(:mod:`pettingllm_envs.code.stdio_problems`): words, brackets, runs of letters, matrix and
number layouts. Records in the ``generic`` format of :mod:`pettingllm_envs.code.datasets`."""

TEXT_PROBLEMS: tuple[dict, ...] = (
    {
        "id": 'reverse_words',
        "statement": (
            'Read one line of words separated by single spaces. Print the words in reverse order, '
            'separated by single spaces.\n'
            '\n'
            'Example input:\n'
            'hello big world\n'
            'Example output:\n'
            'world big hello\n'
        ),
        "solution": 'print(" ".join(reversed(input().split())))\n',
        "tests": [
            {"input": 'one\n', "output": 'one\n'},
            {"input": 'a b c d e\n', "output": 'e d c b a\n'},
            {"input": 'the quick brown fox\n', "output": 'fox brown quick the\n'},
            {"input": 'x yy zzz yy x\n', "output": 'x yy zzz yy x\n'},
        ],
    },
    {
        "id": 'fizzbuzz',
        "statement": (
            'Read an integer n. For i = 1..n print one line: "FizzBuzz" if i is divisible by 15, '
            '"Fizz" if by 3, "Buzz" if by 5, else i.\n'
            '\n'
            'Example input:\n'
            '5\n'
            'Example output:\n'
            '1\n'
            '2\n'
            'Fizz\n'
            '4\n'
            'Buzz\n'
        ),
        "solution": (
            'n = int(input())\n'
            'for i in range(1, n + 1):\n'
            '    print("FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 '
            'else i)\n'
        ),
        "tests": [
            {"input": '1\n', "output": '1\n'},
            {"input": '3\n', "output": '1\n2\nFizz\n'},
            {"input": '15\n', "output": '1\n2\nFizz\n4\nBuzz\nFizz\n7\n8\nFizz\nBuzz\n11\nFizz\n13\n14\nFizzBuzz\n'},
            {
                "input": '16\n',
                "output": (
                    '1\n'
                    '2\n'
                    'Fizz\n'
                    '4\n'
                    'Buzz\n'
                    'Fizz\n'
                    '7\n'
                    '8\n'
                    'Fizz\n'
                    'Buzz\n'
                    '11\n'
                    'Fizz\n'
                    '13\n'
                    '14\n'
                    'FizzBuzz\n'
                    '16\n'
                ),
            },
        ],
    },
    {
        "id": 'balanced_brackets',
        "statement": (
            'Read one line made of the characters ()[]{}. Print YES if the brackets are balanced and '
            'properly nested, otherwise NO.\n'
            '\n'
            'Example input:\n'
            '([]{})\n'
            'Example output:\n'
            'YES\n'
        ),
        "solution": (
            'line = input().strip()\n'
            'pairs = {")": "(", "]": "[", "}": "{"}\n'
            'stack = []\n'
            'ok = True\n'
            'for ch in line:\n'
            '    if ch in "([{":\n'
            '        stack.append(ch)\n'
            '    elif not stack or stack.pop() != pairs[ch]:\n'
            '        ok = False\n'
            '        break\n'
            'print("YES" if ok and not stack else "NO")\n'
        ),
        "tests": [
            {"input": '(\n', "output": 'NO\n'},
            {"input": ')(\n', "output": 'NO\n'},
            {"input": '([)]\n', "output": 'NO\n'},
            {"input": '{[()()]}\n', "output": 'YES\n'},
            {"input": '((((()))))[]\n', "output": 'YES\n'},
            {"input": ']\n', "output": 'NO\n'},
        ],
    },
    {
        "id": 'transpose',
        "statement": (
            'Read two integers r and c, then r lines of c integers (a matrix). Print its transpose: '
            'c lines of r integers separated by spaces.\n'
            '\n'
            'Example input:\n'
            '2 3\n'
            '1 2 3\n'
            '4 5 6\n'
            'Example output:\n'
            '1 4\n'
            '2 5\n'
            '3 6\n'
        ),
        "solution": (
            'r, c = map(int, input().split())\n'
            'rows = [input().split() for _ in range(r)]\n'
            'for j in range(c):\n'
            '    print(" ".join(rows[i][j] for i in range(r)))\n'
        ),
        "tests": [
            {"input": '1 1\n9\n', "output": '9\n'},
            {"input": '3 1\n1\n2\n3\n', "output": '1 2 3\n'},
            {"input": '1 4\n5 6 7 8\n', "output": '5\n6\n7\n8\n'},
            {"input": '3 3\n1 2 3\n4 5 6\n7 8 9\n', "output": '1 4 7\n2 5 8\n3 6 9\n'},
        ],
    },
    {
        "id": 'run_length',
        "statement": (
            'Read one line of lowercase letters. Print its run-length encoding: each maximal run of '
            'a letter as the letter followed by the run length, e.g. "aaabcc" -> "a3b1c2".\n'
            '\n'
            'Example input:\n'
            'aaabcc\n'
            'Example output:\n'
            'a3b1c2\n'
        ),
        "solution": (
            's = input().strip()\n'
            'out = []\n'
            'i = 0\n'
            'while i < len(s):\n'
            '    j = i\n'
            '    while j < len(s) and s[j] == s[i]:\n'
            '        j += 1\n'
            '    out.append(f"{s[i]}{j - i}")\n'
            '    i = j\n'
            'print("".join(out))\n'
        ),
        "tests": [
            {"input": 'a\n', "output": 'a1\n'},
            {"input": 'abc\n', "output": 'a1b1c1\n'},
            {"input": 'zzzzzzzzzzzz\n', "output": 'z12\n'},
            {"input": 'aabbaa\n', "output": 'a2b2a2\n'},
            {"input": 'abbbbbbbbbbbbc\n', "output": 'a1b12c1\n'},
        ],
    },
    {
        "id": 'palindrome',
        "statement": (
            'Read one line. Ignoring case and every character that is not a letter or a digit, is it '
            'a palindrome? Print YES or NO.\n'
            '\n'
            'Example input:\n'
            'Never odd or even\n'
            'Example output:\n'
            'YES\n'
        ),
        "solution": (
            's = [ch.lower() for ch in input() if ch.isalnum()]\n'
            'print("YES" if s == s[::-1] else "NO")\n'
        ),
        "tests": [
            {"input": 'a\n', "output": 'YES\n'},
            {"input": 'ab\n', "output": 'NO\n'},
            {"input": 'A man, a plan, a canal: Panama\n', "output": 'YES\n'},
            {"input": 'No lemon, no melon!\n', "output": 'YES\n'},
            {"input": '12321x\n', "output": 'NO\n'},
            {"input": 'Was it a car or a cat I saw?\n', "output": 'YES\n'},
        ],
    },
    {
        "id": 'word_frequency',
        "statement": (
            'Read an integer n, then n lines with one lowercase word each. Print each distinct word '
            'with its count, one "word count" per line, sorted by decreasing count and then '
            'alphabetically.\n'
            '\n'
            'Example input:\n'
            '3\n'
            'b\n'
            'a\n'
            'b\n'
            'Example output:\n'
            'b 2\n'
            'a 1\n'
        ),
        "solution": (
            'from collections import Counter\n'
            'n = int(input())\n'
            'counts = Counter(input().strip() for _ in range(n))\n'
            'for word, count in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0])):\n'
            '    print(word, count)\n'
        ),
        "tests": [
            {"input": '1\nx\n', "output": 'x 1\n'},
            {"input": '4\nd\nc\nb\na\n', "output": 'a 1\nb 1\nc 1\nd 1\n'},
            {"input": '6\npear\napple\npear\nfig\napple\npear\n', "output": 'pear 3\napple 2\nfig 1\n'},
            {"input": '5\nzz\nzz\nzz\nzz\nzz\n', "output": 'zz 5\n'},
            {"input": '4\nbb\naa\naa\nbb\n', "output": 'aa 2\nbb 2\n'},
        ],
    },
    {
        "id": 'binary_digits',
        "statement": (
            'Read a non-negative integer n. Print its binary representation without leading zeros (0 '
            'prints as 0), then, on the next line, the number of 1 bits.\n'
            '\n'
            'Example input:\n'
            '5\n'
            'Example output:\n'
            '101\n'
            '2\n'
        ),
        "solution": (
            'n = int(input())\n'
            'print(bin(n)[2:])\n'
            'print(bin(n).count("1"))\n'
        ),
        "tests": [
            {"input": '0\n', "output": '0\n0\n'},
            {"input": '1\n', "output": '1\n1\n'},
            {"input": '255\n', "output": '11111111\n8\n'},
            {"input": '1024\n', "output": '10000000000\n1\n'},
            {"input": '123456789\n', "output": '111010110111100110100010101\n16\n'},
        ],
    },
)
