//! `GET /api/threads`'s listing over the index (`edgent::runtime::thread_index::list_threads`):
//! paging by the cursor, each filter, every listing on an index (query plans), bad queries and
//! D1 failing.

use serde_json::Value;

use edgent::api::thread_index::IndexRow;
use edgent::runtime::thread_index::{delete_from_index, list_threads};
use edgent::testing::{block_on, SqliteD1};

use super::{PARENT, T0};

/// Query pairs as a test writes them.
pub(super) type Query<'a> = &'a [(&'a str, &'a str)];

pub(super) fn list(index: &SqliteD1, query: Query<'_>) -> Result<Value, edgent::api::ApiError> {
    let pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    block_on(list_threads(index, &pairs))
}

/// Six threads: two agents, all three statuses, tags, one child; created a millisecond
/// apart except two in the same millisecond (ordered by id).
fn seeded() -> SqliteD1 {
    let index = SqliteD1::thread_index();
    let threads = [
        (
            "00000000-0000-4000-8000-000000000001",
            "support",
            "idle",
            vec!["vip"],
            None,
            1,
        ),
        (
            "00000000-0000-4000-8000-000000000002",
            "sales",
            "running",
            vec![],
            None,
            2,
        ),
        (
            "00000000-0000-4000-8000-000000000003",
            "support",
            "stopped",
            vec!["vip", "eu"],
            None,
            3,
        ),
        (
            "00000000-0000-4000-8000-000000000004",
            "support",
            "idle",
            vec!["eu"],
            Some(PARENT),
            4,
        ),
        (
            "00000000-0000-4000-8000-000000000005",
            "sales",
            "idle",
            vec![],
            None,
            4,
        ),
        (
            "00000000-0000-4000-8000-000000000006",
            "support",
            "running",
            vec!["vip"],
            None,
            5,
        ),
    ];
    for (id, agent, status, tags, parent, at) in threads {
        let row = IndexRow {
            thread_id: id.into(),
            agent_id: agent.into(),
            status: status.into(),
            tags: tags.into_iter().map(str::to_owned).collect(),
            parent: parent.map(str::to_owned),
            created_at: T0 + at,
            updated_at: T0 + at,
            ..IndexRow::default()
        };
        block_on(edgent::runtime::ConfigDb::batch(&index, row.upsert())).unwrap();
    }
    index
}

/// The last digit of each listed id, in order.
fn ids(page: &Value) -> Vec<u8> {
    page["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap().as_bytes()[35] - b'0')
        .collect()
}

#[test]
fn pages_follow_the_cursor_newest_first_without_gaps_or_repeats() {
    let index = seeded();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut query = vec![("limit", "4")];
        if let Some(c) = &cursor {
            query.push(("cursor", c.as_str()));
        }
        let page = list(&index, &query).unwrap();
        seen.extend(ids(&page));
        pages += 1;
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 2);
    // 5 and 4 share a millisecond: the id orders them.
    assert_eq!(seen, vec![6, 5, 4, 3, 2, 1]);
    let page = list(&index, &[("limit", "6")]).unwrap();
    assert_eq!(page["next_cursor"], Value::Null, "no empty last page");
    let first = &list(&index, &[("limit", "1")]).unwrap()["threads"][0];
    for key in [
        "thread_id",
        "agent_id",
        "status",
        "title",
        "tags",
        "parent",
        "turn_count",
        "last_error",
        "created_at",
        "updated_at",
    ] {
        assert!(first.get(key).is_some(), "{key} missing from {first}");
    }
}

#[test]
fn each_filter_selects_its_threads_and_pages_too() {
    let index = seeded();
    let cases: [(Query<'_>, Vec<u8>); 6] = [
        (&[("agent", "sales")], vec![5, 2]),
        (&[("status", "idle")], vec![5, 4, 1]),
        (&[("tag", "vip")], vec![6, 3, 1]),
        (&[("tag", "eu"), ("agent", "support")], vec![4, 3]),
        (&[("parent", PARENT)], vec![4]),
        (&[("agent", "nobody")], vec![]),
    ];
    for (query, want) in cases {
        assert_eq!(ids(&list(&index, query).unwrap()), want, "{query:?}");
    }
    let first = list(&index, &[("tag", "vip"), ("limit", "2")]).unwrap();
    assert_eq!(ids(&first), vec![6, 3]);
    let cursor = first["next_cursor"].as_str().unwrap();
    let rest = list(
        &index,
        &[("tag", "vip"), ("limit", "2"), ("cursor", cursor)],
    )
    .unwrap();
    assert_eq!(
        (ids(&rest), rest["next_cursor"].clone()),
        (vec![1], Value::Null)
    );
}

#[test]
fn every_listing_walks_an_index_in_its_order() {
    let index = seeded();
    let cursor = edgent::api::thread_index::Cursor {
        created_at: T0 + 4,
        thread_id: "00000000-0000-4000-8000-000000000005".into(),
    }
    .encode();
    let queries: [Query<'_>; 6] = [
        &[],
        &[("cursor", &cursor)],
        &[("agent", "support"), ("cursor", &cursor)],
        &[("status", "idle")],
        &[("parent", PARENT)],
        &[("tag", "vip"), ("cursor", &cursor)],
    ];
    for query in queries {
        let pairs: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let (sql, params) = edgent::api::thread_index::ListQuery::parse(&pairs)
            .unwrap()
            .statement();
        let plan = index
            .query(&format!("EXPLAIN QUERY PLAN {sql}"), params)
            .unwrap();
        let plan: Vec<&str> = plan.iter().filter_map(|r| r["detail"].as_str()).collect();
        let text = plan.join(" | ");
        assert!(!text.contains("TEMP B-TREE"), "{query:?} sorts: {text}");
        // Every table is reached through an index (or the tags' primary key), none scanned.
        assert!(
            plan.iter().all(|step| step.contains("USING")),
            "{query:?}: {text}"
        );
    }
}

#[test]
fn a_bad_query_is_a_400_and_d1_failing_a_500() {
    let index = seeded();
    let batches = index.batches();
    for query in [
        &[("limit", "0")][..],
        &[("limit", "201")],
        &[("status", "done")],
        &[("parent", "not-a-thread")],
        &[("cursor", "bm9wZQ")],
    ] {
        let e = list(&index, query).unwrap_err();
        assert_eq!((e.status, e.code), (400, "invalid_request"), "{query:?}");
    }
    assert_eq!(index.batches(), batches, "a bad query never reaches D1");
    index.fail(true);
    let e = list(&index, &[]).unwrap_err();
    assert_eq!((e.status, e.code), (500, "internal"));
    assert!(
        !e.message.contains("D1_ERROR"),
        "the cause is logged, not shown"
    );
    assert!(index.logged_errors().iter().any(|l| l.contains("D1_ERROR")));
    let e = block_on(delete_from_index(&index, PARENT)).unwrap_err();
    assert_eq!(e.status, 500);
}
