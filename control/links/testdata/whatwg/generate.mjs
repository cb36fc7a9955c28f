// generate.mjs writes hrefs.json: for every string in inputs.json, the
// href Node's WHATWG URL parser gives it (null when it refuses it) and the
// href of that href parsed again. TestNormalizeURLAgainstWHATWG reads
// hrefs.json, so the Go tests need no Node.
//
// Regenerate after editing inputs.json (Node 20 or later):
//
//	node control/links/testdata/whatwg/generate.mjs
//
// Node 20's parser (ada 2.9.2) leaves dot segments unresolved after a
// segment that starts with '.' (/a/.b/../c stays so; the URL Standard,
// browsers and github.com/nlnwa/whatwg-url make it /a/c), so inputs.json
// has no such path; TestNormalizeURL holds NormalizeURL to the Standard
// there.
import { readFileSync, writeFileSync } from "node:fs";

const dir = new URL(".", import.meta.url);
const inputs = JSON.parse(readFileSync(new URL("inputs.json", dir), "utf8"));

function href(s) {
  try {
    return new URL(s).href;
  } catch {
    return null;
  }
}

const entries = inputs.map((input) => {
  const h = href(input);
  return { input, href: h, reparsed: h === null ? null : href(h) };
});
// One entry a line, so a regeneration's diff shows what moved; invisible
// and combining characters escaped, so a reader sees them.
const visible = (s) =>
  s.replace(/[^\x20-\x7e]/gu, (c) =>
    /[\p{Cc}\p{Cf}\p{Z}\p{Mn}\p{Me}\p{Co}\p{Cn}]/u.test(c) && c.length === 1
      ? "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")
      : c);
const generator = JSON.stringify(`node ${process.versions.node}, ada ${process.versions.ada}`);
const lines = entries.map((e) => "  " + visible(JSON.stringify(e))).join(",\n");
writeFileSync(new URL("hrefs.json", dir), `{"generator": ${generator}, "entries": [\n${lines}\n]}\n`);
console.log(`${entries.length} entries, ${entries.filter((e) => e.href === null).length} refused by WHATWG`);
