//! `-o html`: one self-contained page (inline CSS and a few lines of inline script; no
//! URL, font or script from anywhere else) drawn from a small report model, so that any
//! what-if question (plain simulate, how many fit, two configs compared, and later drain or
//! added nodes) only has to fill [`HtmlReport`].
//!
//! Size: a node is one table row whose bars are CSS custom properties on one element per
//! resource (`<s style="--b:40%;--a:75%">`), about 60 bytes each, so 5,000 nodes stay near
//! 1.5 MB (docs/simulate.md has the measured figure).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use scheduler_core::simulate::NodeUsage;

/// Rows of a list (pending pods, a table) written before the rest is only counted.
pub const MAX_ROWS: usize = 2_000;

/// Everything a report page shows.
#[derive(Clone, Debug, Default)]
pub struct HtmlReport {
    pub title: String,
    /// The question asked, in words ("How many copies of Deployment default/web fit?").
    pub question: String,
    /// The answer, one paragraph per entry.
    pub answer: Vec<String>,
    /// What the two bars of each node show (e.g. "before", "after"; or two configs' names).
    pub labels: [String; 2],
    pub nodes: Vec<NodeBars>,
    /// Extra tables (copies per node, pods placed differently, ...).
    pub tables: Vec<Table>,
    /// Pods left pending, with why.
    pub pending: Vec<PendingPod>,
}

/// One node's resources, each with its two figures.
#[derive(Clone, Debug, Default)]
pub struct NodeBars {
    pub name: String,
    /// What the question did to the node (`drained`, `removed`, `added`), shown by its name.
    pub note: Option<String>,
    pub resources: Vec<Bar>,
}

/// One resource of a node: allocatable, and requested in the two states compared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bar {
    /// `cpu` (millicores), `memory` (bytes), `pods`, or an extended resource's name.
    pub resource: String,
    pub allocatable: i64,
    pub before: i64,
    pub after: i64,
}

#[derive(Clone, Debug, Default)]
pub struct Table {
    pub caption: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

#[derive(Clone, Debug)]
pub struct PendingPod {
    pub pod: String,
    pub reason: String,
}

impl NodeBars {
    /// A node's cpu, memory, pods and extended resources (those it has or that are asked
    /// for) in two states. `after` is matched to `before` by node name; a node missing from
    /// one side counts as nothing requested there.
    pub fn pair(before: &[NodeUsage], after: &[NodeUsage]) -> Vec<NodeBars> {
        let find = |list: &'_ [NodeUsage], name: &str| -> Option<NodeUsage> {
            list.binary_search_by(|n| n.node.as_str().cmp(name))
                .ok()
                .map(|i| list[i].clone())
        };
        let names: BTreeSet<&str> = before
            .iter()
            .chain(after)
            .map(|n| n.node.as_str())
            .collect();
        names
            .into_iter()
            .map(|name| {
                let (b, a) = (find(before, name), find(after, name));
                let any = a.as_ref().or(b.as_ref()).expect("named by one side");
                let req = |u: &Option<NodeUsage>, f: fn(&NodeUsage) -> i64| u.as_ref().map_or(0, f);
                let mut resources = vec![
                    Bar {
                        resource: "cpu".into(),
                        allocatable: any.cpu_allocatable_milli,
                        before: req(&b, |n| n.cpu_milli),
                        after: req(&a, |n| n.cpu_milli),
                    },
                    Bar {
                        resource: "memory".into(),
                        allocatable: any.memory_allocatable,
                        before: req(&b, |n| n.memory),
                        after: req(&a, |n| n.memory),
                    },
                    Bar {
                        resource: "pods".into(),
                        allocatable: any.max_pods,
                        before: req(&b, |n| n.pods),
                        after: req(&a, |n| n.pods),
                    },
                ];
                for (k, (_, alloc)) in &any.extended {
                    let ext = |u: &Option<NodeUsage>| {
                        u.as_ref()
                            .and_then(|n| n.extended.get(k))
                            .map_or(0, |(r, _)| *r)
                    };
                    let (rb, ra) = (ext(&b), ext(&a));
                    if *alloc != 0 || rb != 0 || ra != 0 {
                        resources.push(Bar {
                            resource: k.clone(),
                            allocatable: *alloc,
                            before: rb,
                            after: ra,
                        });
                    }
                }
                NodeBars {
                    name: name.to_string(),
                    note: None,
                    resources,
                }
            })
            .collect()
    }

    /// Marks the nodes named in `names` with `note`.
    pub fn mark(nodes: &mut [NodeBars], names: &[String], note: &str) {
        for n in nodes.iter_mut() {
            if names.contains(&n.name) {
                n.note = Some(note.to_string());
            }
        }
    }
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 8px;text-align:left;vertical-align:top;border-bottom:1px solid #eee}\
th{background:#f4f4f4;position:sticky;top:0}\
.q{font-weight:600}.legend i{display:inline-block;width:1.5em;height:.7em;margin:0 .3em 0 1em}\
s{display:block;position:relative;width:9em;height:5px;margin:2px 0 10px;text-decoration:none;\
background:linear-gradient(to right,#3b7dd8 var(--b),#e3e3e3 var(--b))}\
s::after{content:'';position:absolute;left:0;right:0;top:7px;height:5px;\
background:linear-gradient(to right,#e08a1e var(--a),#e3e3e3 var(--a))}\
td.r{font-size:12px}td em{font-size:11px;color:#fff;background:#777;border-radius:3px;padding:0 4px;margin-left:.4em;font-style:normal}td.over{color:#b00}\
#filter{margin:.3em 0;padding:2px 4px}";

/// Sets `data-rendered="ok"` and counts on `<body>` once the page is set up (a test
/// checks them in a headless browser), and filters the node table by name.
const SCRIPT: &str = "(function(){var t=document.getElementById('nodes');\
var rows=t?t.tBodies[0].rows:[];var f=document.getElementById('filter');\
if(f){f.oninput=function(){var q=f.value;for(var i=0;i<rows.length;i++){\
rows[i].hidden=q!==''&&rows[i].cells[0].textContent.indexOf(q)<0;}};}\
var p=document.getElementById('pending');\
document.body.setAttribute('data-nodes',String(rows.length));\
document.body.setAttribute('data-pending',String(p?p.tBodies[0].rows.length:0));\
document.body.setAttribute('data-rendered','ok');})();";

impl HtmlReport {
    /// The whole page.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096 + self.nodes.len() * 300);
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>\
<meta name=viewport content=\"width=device-width\"><title>{}</title><style>{STYLE}</style>\
</head><body>\n<h1>{}</h1>\n<p class=q>{}</p>\n",
            esc(&self.title),
            esc(&self.title),
            esc(&self.question)
        );
        for p in &self.answer {
            let _ = writeln!(out, "<p>{}</p>", esc(p));
        }
        for t in &self.tables {
            render_table(&mut out, t);
        }
        self.render_pending(&mut out);
        self.render_nodes(&mut out);
        let _ = write!(out, "<script>{SCRIPT}</script>\n</body></html>\n");
        out
    }

    fn render_pending(&self, out: &mut String) {
        let _ = writeln!(out, "<h2>Pending pods ({})</h2>", self.pending.len());
        if self.pending.is_empty() {
            out.push_str("<p>None.</p>\n");
            return;
        }
        out.push_str("<table id=pending><thead><tr><th>Pod</th><th>Why</th></tr></thead><tbody>\n");
        for p in self.pending.iter().take(MAX_ROWS) {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td></tr>",
                esc(&p.pod),
                esc(&p.reason)
            );
        }
        out.push_str("</tbody></table>\n");
        more(out, self.pending.len());
    }

    fn render_nodes(&self, out: &mut String) {
        // Columns: cpu, memory, pods, then every other resource any node shows.
        let mut columns: Vec<&str> = vec!["cpu", "memory", "pods"];
        let extra: BTreeSet<&str> = self
            .nodes
            .iter()
            .flat_map(|n| n.resources.iter().map(|r| r.resource.as_str()))
            .filter(|r| !columns.contains(r))
            .collect();
        columns.extend(extra);
        let _ = writeln!(
            out,
            "<h2>Nodes ({})</h2>\n<p class=legend>Requested of allocatable:<i style=\"background:#3b7dd8\"></i>{}<i style=\"background:#e08a1e\"></i>{}</p>\n<input id=filter placeholder=\"filter nodes by name\">",
            self.nodes.len(),
            esc(&self.labels[0]),
            esc(&self.labels[1]),
        );
        out.push_str("<table id=nodes><thead><tr><th>Node</th>");
        for c in &columns {
            let _ = write!(out, "<th>{}</th>", esc(c));
        }
        out.push_str("</tr></thead><tbody>\n");
        for n in &self.nodes {
            match &n.note {
                None => {
                    let _ = write!(out, "<tr><td>{}</td>", esc(&n.name));
                }
                Some(note) => {
                    let _ = write!(out, "<tr><td>{}<em>{}</em></td>", esc(&n.name), esc(note));
                }
            }
            for c in &columns {
                match n.resources.iter().find(|r| r.resource == *c) {
                    Some(r) => render_bar(out, r),
                    None => out.push_str("<td>-</td>"),
                }
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table>\n");
    }
}

/// One resource's cell: both bars and `before→after/allocatable` in the resource's unit.
fn render_bar(out: &mut String, r: &Bar) {
    let pct = |v: i64| {
        if r.allocatable <= 0 {
            if v > 0 { 100 } else { 0 }
        } else {
            (v.max(0) * 100 / r.allocatable).min(100)
        }
    };
    let over = r.after > r.allocatable || r.before > r.allocatable;
    let _ = write!(
        out,
        "<td class=\"r{}\"><s style=\"--b:{}%;--a:{}%\"></s>{}\u{2192}{}/{}</td>",
        if over { " over" } else { "" },
        pct(r.before),
        pct(r.after),
        amount(&r.resource, r.before),
        amount(&r.resource, r.after),
        amount(&r.resource, r.allocatable),
    );
}

/// `v` of `resource` for people: cores, Gi/Mi, or the plain count.
pub fn amount(resource: &str, v: i64) -> String {
    match resource {
        "cpu" if v % 1000 == 0 => format!("{}", v / 1000),
        "cpu" => format!("{}m", v),
        "memory" | "ephemeral-storage" => {
            const GI: i64 = 1 << 30;
            const MI: i64 = 1 << 20;
            if v == 0 {
                "0".into()
            } else if v >= GI {
                let tenths = v * 10 / GI;
                if tenths % 10 == 0 {
                    format!("{}Gi", tenths / 10)
                } else {
                    format!("{}.{}Gi", tenths / 10, tenths % 10)
                }
            } else {
                format!("{}Mi", v / MI)
            }
        }
        _ => v.to_string(),
    }
}

fn render_table(out: &mut String, t: &Table) {
    let _ = writeln!(out, "<h2>{} ({})</h2>", esc(&t.caption), t.rows.len());
    if t.rows.is_empty() {
        out.push_str("<p>None.</p>\n");
        return;
    }
    out.push_str("<table><thead><tr>");
    for h in &t.header {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for row in t.rows.iter().take(MAX_ROWS) {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{}</td>", esc(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    more(out, t.rows.len());
}

fn more(out: &mut String, total: usize) {
    if total > MAX_ROWS {
        let _ = writeln!(
            out,
            "<p>... and {} more (-o json lists all).</p>",
            total - MAX_ROWS
        );
    }
}

/// Text made safe for HTML element content and quoted attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn usage(node: &str, cpu: i64, gpus: Option<(i64, i64)>) -> NodeUsage {
        NodeUsage {
            node: node.into(),
            pods: 1,
            max_pods: 110,
            cpu_milli: cpu,
            cpu_allocatable_milli: 4000,
            memory: 1 << 30,
            memory_allocatable: 8 << 30,
            extended: gpus
                .map(|g| BTreeMap::from([("nvidia.com/gpu".to_string(), g)]))
                .unwrap_or_default(),
        }
    }

    #[test]
    fn bars_pair_nodes_by_name_and_keep_extended_resources() {
        let before = [usage("a", 1000, None), usage("g", 0, Some((0, 8)))];
        let after = [usage("a", 3000, None), usage("g", 0, Some((2, 8)))];
        let bars = NodeBars::pair(&before, &after);
        assert_eq!(bars.len(), 2);
        assert_eq!(
            bars[0].resources[0],
            Bar {
                resource: "cpu".into(),
                allocatable: 4000,
                before: 1000,
                after: 3000
            }
        );
        let gpu = bars[1]
            .resources
            .iter()
            .find(|r| r.resource == "nvidia.com/gpu");
        assert_eq!(
            gpu.map(|g| (g.before, g.after, g.allocatable)),
            Some((0, 2, 8))
        );
        let page = HtmlReport {
            title: "t".into(),
            nodes: bars,
            labels: ["before".into(), "after".into()],
            ..HtmlReport::default()
        }
        .render();
        // a: 25% then 75% of its CPU; g has the GPU column, a shows "-" there.
        assert!(
            page.contains("<s style=\"--b:25%;--a:75%\"></s>1\u{2192}3/4</td>"),
            "{page}"
        );
        assert!(
            page.contains("<s style=\"--b:0%;--a:25%\"></s>0\u{2192}2/8</td>"),
            "{page}"
        );
        assert!(page.contains("<th>nvidia.com/gpu</th>"));
        assert!(page.contains("<tr><td>a</td>") && page.contains("<td>-</td>"));
    }

    #[test]
    fn text_is_escaped_and_long_lists_are_cut_with_a_count() {
        let page = HtmlReport {
            title: "<script>alert(1)</script>".into(),
            pending: (0..MAX_ROWS + 5)
                .map(|i| PendingPod {
                    pod: format!("ns/p{i}"),
                    reason: "a & b".into(),
                })
                .collect(),
            ..HtmlReport::default()
        }
        .render();
        assert!(!page.contains("<script>alert"));
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("a &amp; b"));
        assert!(page.contains("... and 5 more"), "cut list");
        assert!(!page.contains(&format!("ns/p{}", MAX_ROWS)));
    }

    #[test]
    fn amounts_read_as_kubectl_would_write_them() {
        assert_eq!(amount("cpu", 2000), "2");
        assert_eq!(amount("cpu", 1500), "1500m");
        assert_eq!(amount("memory", 3 << 29), "1.5Gi");
        assert_eq!(amount("memory", 512 << 20), "512Mi");
        assert_eq!(amount("nvidia.com/gpu", 3), "3");
        assert_eq!(amount("memory", 0), "0");
    }
}
