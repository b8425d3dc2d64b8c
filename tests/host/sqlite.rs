//! The host side of the SQL seam: rusqlite running the exact statements the Durable Object
//! runs (the shipped `edgent::testing::Sqlite`).

pub(crate) use edgent::testing::Sqlite;
