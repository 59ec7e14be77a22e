-- demo only: SELECT-only reader
CREATE USER IF NOT EXISTS 'aci_reader'@'%' IDENTIFIED BY 'aci-demo-reader';
GRANT SELECT ON `shop`.* TO 'aci_reader'@'%' WITH MAX_STATEMENT_TIME 30;
CREATE USER IF NOT EXISTS 'aci_reader'@'localhost' IDENTIFIED BY 'aci-demo-reader';
GRANT SELECT ON `shop`.* TO 'aci_reader'@'localhost' WITH MAX_STATEMENT_TIME 30;
