//! The console's HTML: escaping, the page frame, and the small pieces every page shares.
//!
//! Every page is whole HTML from the daemon, readable with scripts off; `console.js` only adds
//! live updates, notifications and `@agent` completion. Anything that did not come from this
//! file's literals goes through [`escape`] (text and attribute values alike), or through
//! `markdown::render` for a message's text.

use std::fmt::Write;

/// `text` safe as HTML text and as a quoted attribute value.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
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

/// Everything but RFC 3986's unreserved characters.
const RESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `text` as one URL path segment, query value or fragment.
pub fn url_part(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, RESERVED).to_string()
}

/// The console's pages, for the navigation (the current one is marked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Conversations,
    Approvals,
    Runtimes,
    Audit,
    Costs,
}

/// A whole page: the frame (navigation, live status, sign-out) around `body`.
pub fn page(title: &str, nav: Nav, csrf: &str, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 2048);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"csrf\" content=\"{csrf}\">\
         <title>{title} · AgentTeam</title>\
         <link rel=\"stylesheet\" href=\"/static/console.css\">\
         <script src=\"/static/console.js\" defer></script></head>\n<body>\
         <a class=\"skip\" href=\"#main\">Skip to content</a>\
         <header><nav aria-label=\"Console\"><ul>",
        csrf = escape(csrf),
        title = escape(title),
    );
    for (item, href, label) in [
        (Nav::Conversations, "/", "Conversations"),
        (Nav::Approvals, "/approvals", "Approvals"),
        (Nav::Runtimes, "/runtimes", "Runtimes"),
        (Nav::Audit, "/audit", "Audit"),
        (Nav::Costs, "/costs", "Costs"),
    ] {
        let current = if item == nav {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(out, "<li><a href=\"{href}\"{current}>{label}</a></li>");
    }
    let _ = write!(
        out,
        "</ul></nav><p id=\"live\" role=\"status\">Live updates need scripts: reload to see new \
         messages.</p><button id=\"notify\" type=\"button\" hidden>Notify me in the background</button>\
         <form class=\"signout\" method=\"post\" action=\"/logout\">{}<button type=\"submit\">Sign out</button></form>\
         </header>\n<main id=\"main\"><h1>{}</h1>\n{body}\n</main></body></html>\n",
        csrf_field(csrf),
        escape(title),
    );
    out
}

/// The hidden CSRF field every form of a session carries.
pub fn csrf_field(csrf: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        escape(csrf)
    )
}

/// A page for a browser with no session, or a request refused: plain, no script, no form.
pub fn plain(title: &str, paragraphs: &[&str]) -> String {
    let mut out = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{0} · AgentTeam</title><link rel=\"stylesheet\" href=\"/static/console.css\">\
         </head>\n<body><main id=\"main\"><h1>{0}</h1>",
        escape(title)
    );
    for paragraph in paragraphs {
        let _ = write!(out, "<p>{}</p>", escape(paragraph));
    }
    out.push_str("</main></body></html>\n");
    out
}

/// An RFC 3339 time as a person reads it (`2026-12-05 04:13 UTC`), in a `<time>`.
pub fn time(at: &str) -> String {
    let shown = chrono::DateTime::parse_from_rfc3339(at)
        .map(|t| {
            t.with_timezone(&chrono::Utc)
                .format("%Y-%m-%d %H:%M UTC")
                .to_string()
        })
        .unwrap_or_else(|_| at.to_string());
    format!(
        "<time datetime=\"{}\">{}</time>",
        escape(at),
        escape(&shown)
    )
}

/// Epoch milliseconds as a person reads them.
pub fn time_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| time(&t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
    )
}

/// A byte count as a person reads it.
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_text_and_attributes() {
        assert_eq!(
            escape("<a href=\"x\" onclick='y'>&</a>"),
            "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;"
        );
    }

    #[test]
    fn url_parts_keep_only_unreserved_characters() {
        assert_eq!(url_part("channel:chn_01A-b.c~"), "channel%3Achn_01A-b.c~");
        assert_eq!(url_part("a/b?c#d&e f"), "a%2Fb%3Fc%23d%26e%20f");
    }

    #[test]
    fn a_page_escapes_its_title() {
        let out = page("<script>", Nav::Costs, "\"csrf", "");
        assert!(!out.contains("<script>·"), "{out}");
        assert!(out.contains("&lt;script&gt;"), "{out}");
        assert!(out.contains("content=\"&quot;csrf\""), "{out}");
    }
}
