//! Our reports against Linux 6.18's own /proc files: every line of ours
//! must have the shape of a line of theirs, in the same key order.

use super::*;

// ------------------------------------------------ against Linux 6.18's /proc

/// /proc/{buddyinfo,pagetypeinfo,zoneinfo,vmstat} of Linux 6.18, captured on
/// this project's machine (the version is in `uname-r` beside them).
mod linux {
    pub(crate) const UNAME: &str = include_str!("../../../../pagealloc/tests/fixtures/proc-6.18/uname-r");
    pub(crate) const BUDDYINFO: &str = include_str!("../../../../pagealloc/tests/fixtures/proc-6.18/buddyinfo");
    pub(crate) const PAGETYPEINFO: &str = include_str!("../../../../pagealloc/tests/fixtures/proc-6.18/pagetypeinfo");
    pub(crate) const ZONEINFO: &str = include_str!("../../../../pagealloc/tests/fixtures/proc-6.18/zoneinfo");
    pub(crate) const VMSTAT: &str = include_str!("../../../../pagealloc/tests/fixtures/proc-6.18/vmstat");
}

/// The length of the word (letters, digits, `_`) at the start of `s`.
fn word_len(s: &str) -> usize {
    s.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_').count()
}

/// The length of the digits at the start of `s`.
fn digits(s: &str) -> usize {
    s.bytes().take_while(u8::is_ascii_digit).count()
}

/// One field of a shape at the start of `s`: (bytes consumed, captured word).
fn field(s: &str, f: &str) -> Option<(usize, Option<String>)> {
    let width = |p: &str| p.parse::<usize>().ok();
    match f {
        "n" => Some((digits(s), None)).filter(|(n, _)| *n > 0),
        "w" => Some((word_len(s), Some(s[..word_len(s)].to_string()))).filter(|(n, _)| *n > 0),
        "list" => {
            let mut i = 0;
            loop {
                let d = digits(&s[i..]);
                if d == 0 {
                    return None;
                }
                i += d;
                if !s[i..].starts_with(", ") {
                    return Some((i, None));
                }
                i += 2;
            }
        }
        _ if f.starts_with(">r") => {
            let skip = usize::from(s.starts_with('>'));
            field(&s[skip..], &f[1..]).map(|(n, c)| (n + skip, c))
        }
        _ if f.starts_with('r') || f.starts_with('s') => {
            let w = width(&f[1..])?;
            let pad = s.bytes().take_while(|b| *b == b' ').count();
            let body = if f.starts_with('r') { digits(&s[pad..]) } else { word_len(&s[pad..]) };
            let ok = body > 0 && (pad + body == w || (pad == 0 && body > w));
            ok.then(|| (pad + body, (f.starts_with('s')).then(|| s[pad..pad + body].to_string())))
        }
        _ if f.starts_with('l') => {
            let w = width(&f[1..])?;
            let body = word_len(s);
            let pad = s[body..].bytes().take_while(|b| *b == b' ').count().min(w.saturating_sub(body));
            (body > 0 && (body + pad == w || body >= w)).then(|| (body + pad, Some(s[..body].to_string())))
        }
        _ => panic!("bad field {f}"),
    }
}

/// A shape as (literal, field, repeat) parts.
fn shape_parts(pat: &str) -> Vec<(String, Option<String>, bool)> {
    let mut parts: Vec<(String, Option<String>, bool)> = Vec::new();
    let mut rest = pat;
    while let Some(i) = rest.find('{') {
        let j = rest[i..].find('}').unwrap() + i;
        let rep = rest[j + 1..].starts_with('*');
        parts.push((rest[..i].to_string(), Some(rest[i + 1..j].to_string()), rep));
        rest = &rest[j + 1 + usize::from(rep)..];
    }
    parts.push((rest.to_string(), None, false));
    parts
}

/// Match `line` against a line shape; returns the words the shape captures.
/// Shapes are literal text with fields: `{n}` a decimal number; `{rN}` a
/// number right-aligned in N columns (`%Nlu`: spaces then digits, exactly N
/// wide, or wider digits); `{>rN}` the same after an optional `>`; `{sN}` a
/// word right-aligned in N columns (`%Ns`); `{lN}` a word left-aligned in N
/// columns (`%-Ns`); `{w}` a word; `{list}` numbers joined by `, `. A word is
/// letters, digits and `_`. A `*` right after a field's closing brace lets the
/// field repeat (at least once), each repeat after the literal text that
/// follows the field (up to the next field or the end).
fn shape(line: &str, pat: &str) -> Option<Vec<String>> {
    let parts = shape_parts(pat);
    let mut caps = Vec::new();
    let mut s = line;
    let mut k = 0;
    while k < parts.len() {
        let (lit, f, rep) = &parts[k];
        s = s.strip_prefix(lit.as_str())?;
        if let Some(f) = f {
            let (n, c) = field(s, f)?;
            caps.extend(c);
            s = &s[n..];
            if *rep {
                // The literal after this field, then the field again, while they match.
                let next_lit = parts.get(k + 1).map_or("", |p| p.0.as_str());
                while let Some(t) = s.strip_prefix(next_lit) {
                    match field(t, f) {
                        Some((n, c)) if !t.is_empty() => {
                            caps.extend(c);
                            s = &t[n..];
                        }
                        _ => break,
                    }
                }
            }
        }
        k += 1;
    }
    s.is_empty().then_some(caps)
}

/// The shape of each line of a report, by name: the first that matches.
fn classify<'a>(line: &str, shapes: &[(&'a str, &str)]) -> Option<(&'a str, Vec<String>)> {
    shapes.iter().find_map(|(name, pat)| shape(line, pat).map(|c| (*name, c)))
}

/// Every line of `ours` and of the kernel's `theirs` has one of `shapes`; each
/// of our lines has a shape the kernel's text has; and our (shape, key) pairs
/// are, block by block (a block starts at a line of shape `block`), a
/// subsequence of a kernel block's: the same keys, in the same order, as far
/// as we have them. Lines of the shapes in `once` count only the first time in
/// a block (per-CPU groups: the machines' CPU counts differ).
fn holds_against(report: &str, ours: &str, theirs: &str, shapes: &[(&str, &str)], block: &str, once: &[&str]) {
    let lines = |text: &str, who: &str| -> Vec<Vec<(String, Vec<String>)>> {
        let mut blocks: Vec<Vec<(String, Vec<String>)>> = vec![Vec::new()];
        for l in text.lines() {
            let (name, caps) =
                classify(l, shapes).unwrap_or_else(|| panic!("{report}: {who}'s line {l:?} has no known shape"));
            if name == block && !blocks.last().unwrap().is_empty() {
                blocks.push(Vec::new());
            }
            blocks.last_mut().unwrap().push((name.to_string(), caps));
        }
        blocks
    };
    let kernel = lines(theirs, "Linux 6.18");
    let mine = lines(ours, "our");
    let key = |(n, c): &(String, Vec<String>)| -> String {
        // Zone and node names vary; the key is the shape and its fixed words.
        match n.as_str() {
            "zone" | "node-zone" => n.clone(),
            "node-zone-type" => format!("{n} {}", c.last().cloned().unwrap_or_default()),
            _ => format!("{n} {}", c.join(" ")),
        }
    };
    for b in &mine {
        let keys = |b: &Vec<(String, Vec<String>)>| -> Vec<String> {
            let mut seen = std::collections::HashSet::new();
            b.iter().filter(|l| !once.contains(&l.0.as_str()) || seen.insert(l.0.clone())).map(key).collect()
        };
        let ks = keys(b);
        let fits = kernel.iter().any(|kb| {
            let kk = keys(kb);
            let mut it = kk.iter();
            ks.iter().all(|k| it.any(|x| x == k))
        });
        assert!(fits, "{report}: our block {ks:?} is not a subsequence of any Linux 6.18 block");
    }
}

#[test]
fn reports_hold_linux_6_18s_line_shapes_and_key_order() {
    assert!(linux::UNAME.starts_with("6.18."), "{}", linux::UNAME);
    let a = PageAllocator::new(Config::small(32 << 20).nodes(2).movable_zone_bytes(4 << 20)).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut live = Vec::new();
    churn(&a, &mut rng, 5_000, &mut live);
    buddyinfo_and_pagetypeinfo_hold(&a);
    zoneinfo_holds(&a);
    vmstat_and_pcpstat_hold(&a);
    for (p, o) in live {
        a.free_pages(p, o).unwrap();
    }
}

fn buddyinfo_and_pagetypeinfo_hold(a: &PageAllocator) {
    let buddy = [("zone", "Node {n}, zone {s8} {r6}* ")];
    holds_against("buddyinfo", &a.stats().buddyinfo().to_string(), linux::BUDDYINFO, &buddy, "zone", &[]);

    let pt = [
        ("pageblock-order", "Page block order: {n}"),
        ("pages-per-block", "Pages per block:  {n}"),
        ("blank", ""),
        ("free-header", "Free pages count per migrate type at order  {r6}* "),
        ("node-zone-type", "Node {r4}, zone {s8}, type {s12} {>r6}* "),
        ("blocks-header", "Number of blocks type  {s12}* "),
        ("node-zone", "Node {n}, zone {s8} {r12}* "),
    ];
    holds_against("pagetypeinfo", &a.stats().pagetypeinfo().render(), linux::PAGETYPEINFO, &pt, "pageblock-order", &[]);
    // The types, in the kernel's order.
    let types = |t: &str| -> Vec<String> { t.lines().filter_map(|l| shape(l, pt[5].1)).next().unwrap() };
    assert_eq!(types(&a.stats().pagetypeinfo().render()), types(linux::PAGETYPEINFO));
}

/// zoneinfo's lines and keys; our statistics are a subset of the kernel's.
fn zoneinfo_holds(a: &PageAllocator) {
    let zi = [
        ("zone", "Node {n}, zone {s8}"),
        ("per-node", "  per-node stats"),
        ("pages-free", "  pages free     {n}"),
        ("protection", "        protection: ({list})"),
        ("watermark", "        {l8} {n}"),
        ("stat", "      {l12} {n}"),
        ("pagesets", "  pagesets"),
        ("cpu", "    cpu: {n}"),
        ("count", "              count:    {n}"),
        ("high", "              high:     {n}"),
        ("batch", "              batch:    {n}"),
        ("high_min", "              high_min: {n}"),
        ("high_max", "              high_max: {n}"),
        ("threshold", "  vm stats threshold: {n}"),
        ("unreclaimable", "  node_unreclaimable:  {n}"),
        ("start-pfn", "  start_pfn:           {n}"),
    ];
    let zoneinfo = a.stats().zoneinfo().to_string();
    let cpu_group = ["cpu", "count", "high", "batch", "high_min", "high_max", "threshold"];
    holds_against("zoneinfo", &zoneinfo, linux::ZONEINFO, &zi, "zone", &cpu_group);
    // Our zone statistics are the kernel's first two and its per-zone file
    // LRU and write-pending counts, our per-node ones its LRU sizes, dirty
    // and writeback pages, and nothing of ours.
    let stats: Vec<String> = zoneinfo.lines().filter_map(|l| shape(l, zi[5].1)).flatten().collect();
    let ours = [
        "nr_free_pages",
        "nr_free_pages_blocks",
        "nr_inactive_file",
        "nr_active_file",
        "nr_dirty",
        "nr_writeback",
        "nr_zone_inactive_file",
        "nr_zone_active_file",
        "nr_zone_write_pending",
    ];
    assert!(!stats.is_empty() && stats.iter().all(|k| ours.contains(&k.as_str())), "{stats:?}");
    // The per-node section once per node, on its first zone, before `pages free`.
    let zones: Vec<&str> = zoneinfo.split("Node ").skip(1).collect();
    let mut nodes_seen = std::collections::HashSet::new();
    for z in &zones {
        let nid = z.split(',').next().unwrap();
        let has = z.contains("\n  per-node stats\n      nr_inactive_file ");
        assert_eq!(has, nodes_seen.insert(nid.to_string()), "node {nid}: the section on the first zone only");
        if has {
            assert!(z.find("per-node stats") < z.find("pages free"));
        }
    }
}

/// vmstat's keys are the kernel's; pcpstat's are none of the kernel's.
fn vmstat_and_pcpstat_hold(a: &PageAllocator) {
    let zoneinfo = a.stats().zoneinfo().to_string();
    let vm = [("item", "{w} {n}")];
    holds_against("vmstat", &a.stats().vmstat().to_string(), linux::VMSTAT, &vm, "none", &[]);
    for (k, _) in a.stats().vmstat().items {
        assert!(linux::VMSTAT.lines().any(|l| l.split(' ').next() == Some(k)), "{k} is not in Linux 6.18's vmstat");
    }
    // pcpstat holds what vmstat and zoneinfo no longer do, none of it the kernel's.
    let pcp = a.stats().pcpstat().to_string();
    for l in pcp.lines() {
        let k = l.split(' ').next().unwrap();
        assert!(shape(l, vm[0].1).is_some(), "{l:?}");
        assert!(!linux::VMSTAT.contains(&format!("\n{k} ")) && !linux::ZONEINFO.contains(&format!(" {k} ")), "{k}");
    }
    for k in [
        "pcp_refill",
        "pcp_drain",
        "pcp_trylock_fail",
        "pcp_depot_park",
        "pcp_depot_take",
        "nr_depot",
        "pgalloc_fallback_claim",
        "pgalloc_fallback_steal",
        "pgalloc_fallback_fragmenting",
        "highatomic_reserve",
        "pgalloc_fail",
        "nr_reserved_highatomic",
        "nolock_alloc",
        "nolock_alloc_fail",
        "nolock_trylock_fail",
        "nolock_free",
        "nolock_deferred_free",
    ] {
        assert!(pcp.contains(&format!("{k} ")), "{k}");
        assert!(!a.stats().vmstat().to_string().contains(k) && !zoneinfo.contains(k), "{k}");
    }
}

#[test]
fn shapes_match_what_they_say() {
    assert_eq!(
        shape("Node 0, zone   Normal      0     12 ", "Node {n}, zone {s8} {r6}* "),
        Some(vec!["Normal".into()])
    );
    // One column too wide, or too narrow, is caught.
    assert!(shape("Node 0, zone   Normal       0 ", "Node {n}, zone {s8} {r6}* ").is_none());
    assert!(shape("Node 0, zone  Normal      0 ", "Node {n}, zone {s8} {r6}* ").is_none());
    assert!(shape("x >100000 1234567 ", "x {>r6}* ").is_some());
    assert_eq!(shape("        min      10509", "        {l8} {n}"), Some(vec!["min".into()]));
    assert!(shape("        min     10509", "        {l8} {n}").is_none());
    assert_eq!(shape("      nr_free_pages_blocks 17408", "      {l12} {n}"), Some(vec!["nr_free_pages_blocks".into()]));
    assert!(shape("      nr_mlock 2958", "      {l12} {n}").is_none());
    assert!(shape("        protection: (0, 3018, 8010)", "        protection: ({list})").is_some());
}
