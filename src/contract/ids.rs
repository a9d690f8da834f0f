//! Identifier types checked by their bytes: every schema definition whose pattern is
//! `^<prefix>[0-9A-Za-z]{<min>,<max>}$` (a lowercase prefix ending in `_`) becomes one of these
//! instead of typify's newtype (`codegen/rust_types.rs` finds them and writes one
//! [`id_types!`] call into `types.rs` with each definition's own prefix, bounds and `maxLength`).
//!
//! typify checks such a pattern with `regress`, a backtracking engine, for every id of every page
//! read (BENCHMARKS.md has what that cost).
//! Here the check is the pattern's meaning spelled out: the prefix, then `min..=max` ASCII letters
//! or digits, and nothing else (the pattern has no flags, so `$` is the end of the text). The
//! types keep typify's surface (the same derives, `Deref` to `String`, the conversions and their
//! error texts), and an owned `String` is checked and kept without a copy. A unit test holds each
//! generated check to its schema pattern compiled by `regress`.

/// Defines the identifier types, each as
/// `Name = ("prefix_", min, max, max_length, "description");`.
macro_rules! id_types {
    ($(
        $name:ident = ($prefix:literal, $min:literal, $max:literal, $max_length:literal, $doc:literal);
    )*) => {
        $(
            #[doc = $doc]
            #[derive(::serde::Serialize, Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
            #[serde(transparent)]
            pub struct $name(::std::string::String);

            impl $name {
                /// Whether `value` is one: typify's checks, in its order and with its messages.
                fn check(value: &str) -> ::std::result::Result<(), self::error::ConversionError> {
                    // More bytes than allowed characters may still be few enough characters.
                    if value.len() > $max_length && value.chars().count() > $max_length {
                        return Err(concat!("longer than ", $max_length, " characters").into());
                    }
                    let matches = value.strip_prefix($prefix).is_some_and(|rest| {
                        ($min..=$max).contains(&rest.len())
                            && rest.bytes().all(|b| b.is_ascii_alphanumeric())
                    });
                    if !matches {
                        return Err(concat!(
                            "doesn't match pattern \"^", $prefix,
                            "[0-9A-Za-z]{", $min, ",", $max, "}$\""
                        )
                        .into());
                    }
                    Ok(())
                }
            }

            impl $name {
                /// Whether `value` is one, without making one.
                pub fn is_valid(value: &str) -> bool {
                    Self::check(value).is_ok()
                }
            }

            impl ::std::ops::Deref for $name {
                type Target = ::std::string::String;
                fn deref(&self) -> &::std::string::String {
                    &self.0
                }
            }

            impl ::std::convert::From<$name> for ::std::string::String {
                fn from(value: $name) -> Self {
                    value.0
                }
            }

            impl ::std::str::FromStr for $name {
                type Err = self::error::ConversionError;
                fn from_str(
                    value: &str,
                ) -> ::std::result::Result<Self, self::error::ConversionError> {
                    Self::check(value)?;
                    Ok(Self(value.to_string()))
                }
            }

            impl ::std::convert::TryFrom<&str> for $name {
                type Error = self::error::ConversionError;
                fn try_from(
                    value: &str,
                ) -> ::std::result::Result<Self, self::error::ConversionError> {
                    value.parse()
                }
            }

            impl ::std::convert::TryFrom<::std::string::String> for $name {
                type Error = self::error::ConversionError;
                fn try_from(
                    value: ::std::string::String,
                ) -> ::std::result::Result<Self, self::error::ConversionError> {
                    Self::check(&value)?;
                    Ok(Self(value))
                }
            }

            impl<'de> ::serde::Deserialize<'de> for $name {
                fn deserialize<D>(deserializer: D) -> ::std::result::Result<Self, D::Error>
                where
                    D: ::serde::Deserializer<'de>,
                {
                    let value = ::std::string::String::deserialize(deserializer)?;
                    Self::try_from(value).map_err(|e: self::error::ConversionError| {
                        <D::Error as ::serde::de::Error>::custom(e.to_string())
                    })
                }
            }
        )*

        /// Every identifier type as (name, its schema pattern, `maxLength`, its check), for the
        /// test that holds the checks to the patterns.
        #[cfg(test)]
        pub(crate) const ID_TYPES: &[(&str, &str, usize, fn(&str) -> bool)] = &[
            $((
                stringify!($name),
                concat!("^", $prefix, "[0-9A-Za-z]{", $min, ",", $max, "}$"),
                $max_length,
                |value| $name::check(value).is_ok(),
            ),)*
        ];
    };
}
pub(crate) use id_types;

#[cfg(test)]
mod tests {
    use crate::contract::types::ID_TYPES;

    /// Each identifier type accepts exactly what its schema's pattern and `maxLength` accept
    /// (the pattern compiled by `regress`, as typify checks it), on the edges of every part.
    #[test]
    fn every_id_check_is_its_schema_pattern() {
        let names: Vec<&str> = ID_TYPES.iter().map(|(name, ..)| *name).collect();
        for expected in [
            "MessageId",
            "ChannelId",
            "TaskId",
            "DmId",
            "WorkflowTriggerId",
        ] {
            assert!(names.contains(&expected), "{expected} in {names:?}");
        }
        for (name, pattern, max_length, check) in ID_TYPES {
            let regex = regress::Regex::new(pattern).unwrap();
            let prefix = pattern[1..].split('[').next().unwrap();
            let mut cases: Vec<String> = Vec::new();
            for n in [0, 1, 7, 8, 9, 63, 64, 65, 80] {
                cases.push(format!("{prefix}{}", "a1Z".repeat(30).get(..n).unwrap()));
            }
            let ok = format!("{prefix}0123456789");
            cases.extend([
                ok.clone(),
                format!("{ok}\n"),
                format!("\n{ok}"),
                format!(" {ok}"),
                format!("{ok} "),
                format!("{ok}é"),
                format!("{ok}_"),
                format!("{ok}-"),
                format!("X{ok}"),
                ok.to_uppercase(),
                ok.replacen('_', "-", 1),
                prefix.to_string(),
                prefix.trim_end_matches('_').to_string(),
                format!("{prefix}{}", "é".repeat(10)),
                format!("{prefix}{}", "٣".repeat(10)),
                String::new(),
            ]);
            for value in &cases {
                let by_schema = regex.find(value).is_some() && value.chars().count() <= *max_length;
                assert_eq!(check(value), by_schema, "{name} on {value:?}");
            }
        }
    }
}
