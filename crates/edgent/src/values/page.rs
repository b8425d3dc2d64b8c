//! A page request: how many rows, from where, in which order.

use super::error::ApiError;
use super::limits::{DEFAULT_PAGE, MAX_PAGE};
use super::status::Order;

/// `?limit=&offset=&order=` of the messages listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageQuery {
    /// 1..=[`MAX_PAGE`].
    pub limit: u32,
    /// Rows to skip.
    pub offset: u32,
    /// `asc` (oldest first) or `desc`.
    pub order: Order,
    /// Include silent messages (`include_silent=true`).
    pub include_silent: bool,
    /// Messages at this depth: 0 (default) is the conversation, 1 the sub-prompts' messages.
    pub depth: u32,
}

/// A page's `limit` query value: an integer from 1 to [`MAX_PAGE`], else 400 (every paged
/// listing reads it the same way).
pub fn parse_limit(value: &str) -> Result<u32, ApiError> {
    value
        .parse()
        .ok()
        .filter(|n| (1..=MAX_PAGE).contains(n))
        .ok_or_else(|| {
            ApiError::invalid(format!("\"limit\" must be an integer from 1 to {MAX_PAGE}"))
        })
}

impl PageQuery {
    /// Validates query pairs; unknown keys are ignored.
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ApiError> {
        let mut q = PageQuery {
            limit: DEFAULT_PAGE,
            offset: 0,
            order: Order::Asc,
            include_silent: false,
            depth: 0,
        };
        for (k, v) in pairs {
            match k {
                "limit" => q.limit = parse_limit(v)?,
                "offset" => {
                    q.offset = v.parse().map_err(|_| {
                        ApiError::invalid("\"offset\" must be a non-negative integer")
                    })?
                }
                "order" => {
                    q.order = match v {
                        "asc" => Order::Asc,
                        "desc" => Order::Desc,
                        _ => {
                            return Err(ApiError::invalid("\"order\" must be \"asc\" or \"desc\""))
                        }
                    }
                }
                "depth" => {
                    q.depth = v.parse().ok().filter(|d| *d <= 8).ok_or_else(|| {
                        ApiError::invalid("\"depth\" must be an integer from 0 to 8")
                    })?
                }
                "include_silent" => {
                    q.include_silent = match v {
                        "true" | "1" => true,
                        "false" | "0" => false,
                        _ => {
                            return Err(ApiError::invalid(
                                "\"include_silent\" must be true or false",
                            ))
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(q)
    }
}
