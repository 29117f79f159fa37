//! D56: the `otpauth://` URI as a QR code, drawn by the binary (no CDN, no
//! image request: the pages' CSP has no `img-src`), as inline SVG.

use qrcode::QrCode;
use qrcode::render::svg;

/// The URI as an inline `<svg>` (black on white, whatever the theme, so
/// phone cameras read it in dark mode too), or `None` when it is too long
/// to encode. The SVG holds only the code's modules: no text of the URI.
pub fn svg_of(uri: &str) -> Option<String> {
    let code = QrCode::new(uri.as_bytes()).ok()?;
    let drawn = code
        .render::<svg::Color<'_>>()
        .min_dimensions(200, 200)
        .dark_color(svg::Color("#000000"))
        .light_color(svg::Color("#ffffff"))
        .build();
    // Inline SVG takes no XML prolog.
    let start = drawn.find("<svg")?;
    let svg = &drawn[start..];
    Some(svg.replacen(
        "<svg",
        "<svg role=\"img\" aria-label=\"QR code of the authenticator set-up link\"",
        1,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_is_inline_svg_without_the_uri_text() {
        let uri = "otpauth://totp/Gatehouse%20%28Acme%29:a%40example.com?secret=ABC&issuer=x";
        let svg = svg_of(uri).unwrap();
        assert!(svg.starts_with("<svg role=\"img\""));
        assert!(!svg.contains("<?xml"));
        assert!(!svg.contains("otpauth"), "only modules, no text");
        assert!(!svg.contains("<script"));
    }
}
