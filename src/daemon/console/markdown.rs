//! What an agent posts, as HTML the console may put on its own origin.
//!
//! The text is untrusted: it is Markdown (CommonMark with tables, strikethrough and task lists)
//! whose raw HTML, inline or in blocks, is shown as text, never parsed as markup. A link keeps
//! its target only when that is an absolute `http`, `https` or `mailto` URL (a `javascript:`,
//! `data:`, `file:` or relative link becomes its text) to a host that is not this machine's
//! loopback (`localhost`, a `*.localhost` name, `127.0.0.0/8`, `::1`, `0.0.0.0`): a browser sends
//! the console's cookie to its name on any port, and a link an agent wrote to a server of its own
//! on the console's name would carry it there. A kept link opens with no referrer and no opener.
//! An image is never loaded (nothing remote loads by itself): it becomes a link to where it is,
//! under the same rule. Everything else is escaped by pulldown-cmark's writer.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};

use super::html::escape;

/// `text` as sanitized HTML (block elements: paragraphs, lists, code blocks…).
pub fn render(text: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    // Whether each open link or image became an `<a>` (its end closes one) or its text alone.
    let mut open: Vec<bool> = Vec::new();
    let events = Parser::new_ext(text, options).flat_map(|event| -> Vec<Event<'_>> {
        match event {
            Event::Html(raw) | Event::InlineHtml(raw) => vec![Event::Text(raw)],
            Event::Start(Tag::Link {
                dest_url, title, ..
            }) => {
                let anchor = safe_url(&dest_url).map(|href| anchor(&href, &title));
                open.push(anchor.is_some());
                anchor.into_iter().collect()
            }
            Event::Start(Tag::Image {
                dest_url, title, ..
            }) => {
                let anchor = safe_url(&dest_url).map(|href| anchor(&href, &title));
                open.push(anchor.is_some());
                let mut out: Vec<Event<'_>> = anchor.into_iter().collect();
                out.push(Event::Text(CowStr::Borrowed("image: ")));
                out
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                if open.pop().unwrap_or(false) {
                    vec![Event::Html(CowStr::Borrowed("</a>"))]
                } else {
                    Vec::new()
                }
            }
            other => vec![other],
        }
    });
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    html::push_html(&mut out, events);
    out
}

/// An opening `<a>` of our own making: its attributes escaped, no referrer, no opener.
fn anchor<'a>(href: &str, title: &str) -> Event<'a> {
    let title = if title.is_empty() {
        String::new()
    } else {
        format!(" title=\"{}\"", escape(title))
    };
    Event::Html(CowStr::Boxed(
        format!(
            "<a href=\"{}\"{title} rel=\"noopener noreferrer nofollow\" referrerpolicy=\"no-referrer\">",
            escape(href)
        )
        .into_boxed_str(),
    ))
}

/// `url` normalized, when it is an absolute `http`, `https` or `mailto` URL to a host other than
/// this machine's loopback.
fn safe_url(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url.trim()).ok()?;
    let web = match parsed.scheme() {
        "http" | "https" => true,
        "mailto" => false,
        _ => return None,
    };
    if web && parsed.host().is_none_or(is_loopback) {
        return None;
    }
    Some(parsed.to_string())
}

/// Whether `host` names this machine: `localhost` and every name under it (browsers resolve them
/// to loopback), a loopback address, or the unspecified one (which browsers connect to locally).
fn is_loopback(host: url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
        url::Host::Ipv4(ip) => ip.is_loopback() || ip.is_unspecified(),
        url::Host::Ipv6(ip) => {
            ip.is_loopback()
                || ip.is_unspecified()
                || ip
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_unspecified())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn raw_html_is_text() {
        let out = render("<script>alert(1)</script>\n\nhi <img src=x onerror=alert(1)>");
        assert!(!out.contains("<script"), "{out}");
        assert!(!out.contains("<img"), "{out}");
        assert!(out.contains("&lt;script&gt;"), "{out}");
        assert!(out.contains("&lt;img src=x onerror=alert(1)&gt;"), "{out}");
    }

    #[test]
    fn a_link_to_this_machine_keeps_only_its_text() {
        for local in [
            "http://at-abc.localhost:3000/",
            "http://AT-ABC.LOCALHOST.:3000/x",
            "https://localhost/",
            "http://127.0.0.1:8080/",
            "http://127.1.2.3/",
            "http://2130706433/",
            "http://0.0.0.0:3000/",
            "http://[::1]:3000/",
            "http://[::ffff:127.0.0.1]/",
        ] {
            let out = render(&format!("[preview]({local}) and <{local}>"));
            assert!(!out.contains("<a "), "{local}: {out}");
            assert!(out.contains("preview"), "{local}: {out}");
        }
        for remote in [
            "http://localhost.example.com/",
            "https://example.localhost.dev/",
        ] {
            let out = render(&format!("[docs]({remote})"));
            assert!(
                out.contains(&format!("<a href=\"{remote}\"")),
                "{remote}: {out}"
            );
        }
    }

    #[test]
    fn only_web_and_mail_links_keep_their_target() {
        for hostile in [
            "[x](javascript:alert(1))",
            "[x](JaVaScRiPt:alert(1))",
            "[x](data:text/html,<script>alert(1)</script>)",
            "[x](file:///etc/passwd)",
            "[x](/api/admin/status)",
            "[x](vbscript:msgbox)",
            "<javascript:alert(1)>",
        ] {
            let out = render(hostile);
            assert!(!out.contains("<a"), "{hostile} gave {out}");
        }
        let out = render("[docs](https://example.com/a?b=\"c\"&d) and <mailto:a@example.com>");
        assert!(
            out.contains("<a href=\"https://example.com/a?b=%22c%22&amp;d\""),
            "{out}"
        );
        assert!(
            out.contains("rel=\"noopener noreferrer nofollow\""),
            "{out}"
        );
        assert!(out.contains("href=\"mailto:a@example.com\""), "{out}");
    }

    #[test]
    fn images_never_load() {
        let out = render("![logo](https://example.com/logo.png) ![x](javascript:alert(1))");
        assert!(!out.contains("<img"), "{out}");
        assert!(
            out.contains("<a href=\"https://example.com/logo.png\""),
            "{out}"
        );
        assert!(out.contains("image: logo"), "{out}");
        assert!(out.contains("image: x"), "{out}");
        assert_eq!(out.matches("<a ").count(), out.matches("</a>").count());
    }

    #[test]
    fn markdown_is_rendered() {
        let out = render("**bold** `code` ~~gone~~\n\n- [x] done\n\n```\n<b>\n```");
        assert!(out.contains("<strong>bold</strong>"), "{out}");
        assert!(out.contains("<code>code</code>"), "{out}");
        assert!(out.contains("<del>gone</del>"), "{out}");
        assert!(out.contains("&lt;b&gt;"), "{out}");
    }
}
