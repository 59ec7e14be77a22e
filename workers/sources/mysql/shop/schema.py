"""DDL of the demo `shop` database.

`orders` deliberately lacks the composite index on (user_id, status): migration
V20260314_1 dropped it (recorded in `schema_migrations`), which is the cause of the
slow-query-storm scenario. `order_events` holds the JSON and BLOB columns.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DDL", "TABLES"]

TABLES: Final = (
    "schema_migrations",
    "customers",
    "orders",
    "order_items",
    "payments",
    "refunds",
    "order_events",
)

DDL: Final = (
    """CREATE TABLE IF NOT EXISTS schema_migrations (
  version VARCHAR(32) NOT NULL PRIMARY KEY,
  description VARCHAR(200) NOT NULL,
  statement TEXT NOT NULL,
  applied_by VARCHAR(40) NOT NULL,
  applied_at DATETIME NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS customers (
  id INT UNSIGNED NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(16) NOT NULL,
  email VARCHAR(120) NOT NULL,
  full_name VARCHAR(80) NOT NULL,
  country CHAR(2) NOT NULL,
  credit_limit DECIMAL(12,2) NULL,
  created_at DATETIME NOT NULL,
  UNIQUE KEY uk_customers_email (email),
  KEY idx_customers_tenant (tenant_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS orders (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(16) NOT NULL,
  user_id INT UNSIGNED NOT NULL,
  status VARCHAR(20) NOT NULL,
  total_amount DECIMAL(12,2) NOT NULL,
  currency CHAR(3) NOT NULL,
  created_at DATETIME(3) NOT NULL,
  updated_at DATETIME(3) NOT NULL,
  KEY idx_orders_tenant_created (tenant_id, created_at),
  KEY idx_orders_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS order_items (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  order_id BIGINT UNSIGNED NOT NULL,
  sku VARCHAR(24) NOT NULL,
  quantity SMALLINT UNSIGNED NOT NULL,
  unit_price DECIMAL(10,2) NOT NULL,
  KEY idx_order_items_order (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS payments (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  order_id BIGINT UNSIGNED NOT NULL,
  provider VARCHAR(20) NOT NULL,
  status VARCHAR(20) NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  risk_score DOUBLE NULL,
  settle_time TIME NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_payments_order (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS refunds (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  payment_id BIGINT UNSIGNED NOT NULL,
  order_id BIGINT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status VARCHAR(20) NOT NULL,
  error_message VARCHAR(200) NULL,
  app_version VARCHAR(16) NOT NULL,
  requested_at DATETIME(3) NOT NULL,
  KEY idx_refunds_requested (requested_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS order_events (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  order_id BIGINT UNSIGNED NOT NULL,
  event_type VARCHAR(32) NOT NULL,
  payload JSON NOT NULL,
  attachment BLOB NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_order_events_order (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
)
