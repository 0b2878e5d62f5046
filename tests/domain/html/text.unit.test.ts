import { describe, expect, it } from 'vitest';
import { wordCount } from '../../../domain/html/facts.ts';
import { textContent } from '../../../domain/html/text.ts';

describe('textContent', () => {
  it('gives one line per block, inline text joined as it renders', () => {
    expect(textContent('<h2>Title</h2><p>Hello <b>wor</b>ld, <a href="/x">link</a>.</p><p>Second</p>')).toBe(
      'Title\nHello world, link.\nSecond',
    );
  });

  it('collapses whitespace as a browser does, except the line breaks of a pre', () => {
    expect(textContent('<p>  a \n\t b  </p>')).toBe('a b');
    expect(textContent('<pre>line 1\nline   2</pre>')).toBe('line 1\nline 2');
  });

  it('breaks lines at br, list items and table cells', () => {
    expect(
      textContent('a<br>b<ul><li>c</li><li>d</li></ul><table><tr><td>e</td><td>f</td></tr></table>'),
    ).toBe('a\nb\nc\nd\ne\nf');
  });

  it('decodes entities', () => {
    expect(textContent('<p>R&amp;D &lt;tags&gt; caf&eacute;&nbsp;bar</p>')).toBe('R&D <tags> café bar');
  });

  it('leaves out script, style, template and comments', () => {
    expect(
      textContent('<p>a<script>var x = 1;</script><style>p{}</style><template>t</template><!-- c -->b</p>'),
    ).toBe('ab');
  });

  it('is empty for an empty body', () => {
    expect(textContent('')).toBe('');
    expect(textContent('<p> </p>')).toBe('');
  });
});

describe('wordCount', () => {
  it.each([
    ['', 0],
    ['<p>   </p>', 0],
    ['<p>a</p><p>b</p>', 2],
    ['<p>one two  three</p>', 3],
    ["<p>Don't panic</p>", 2],
    ['<p>Don\u2019t panic</p>', 2],
    ['<p>Send an e-mail</p>', 3],
    ['<p>Pi is 3.14, or 1,000 milli-pi.</p>', 6],
    ['<p>Hello, world! -- yes...</p>', 3],
    ['<p><b>un</b>believable</p>', 1],
    ['a<br>b', 2],
    ['<ul><li>x</li><li>y</li></ul>', 2],
    ['<p>naïve café Straße Ελλάδα Москва</p>', 5],
    ['<p>x<script>one two three</script><style>a b c</style></p>', 1],
    ['<p>R&amp;D &amp; co</p>', 3],
  ])('counts %j as %i', (html, expected) => {
    expect(wordCount(html)).toBe(expected);
  });
});
