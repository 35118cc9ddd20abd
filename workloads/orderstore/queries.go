// Package orderstore is the PostgreSQL side of the order consumer: the one
// transaction per order-create message of design.md#order-transaction, and the verification
// of an unknown commit outcome of design.md#commit-unknown.
package orderstore

import (
	"embed"

	"github.com/seckill/seckill-operator/workloads/sqlfile"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

var (
	qCommitVerify        = sqlfile.Must(sqlFiles, "commit_verify")
	qReservationUpsert   = sqlfile.Must(sqlFiles, "reservation_upsert")
	qReservationLock     = sqlfile.Must(sqlFiles, "reservation_lock")
	qReservationCreated  = sqlfile.Must(sqlFiles, "reservation_created")
	qReservationRejected = sqlfile.Must(sqlFiles, "reservation_rejected")
	qOrderInsert         = sqlfile.Must(sqlFiles, "order_insert")
	qLedgerOccupy        = sqlfile.Must(sqlFiles, "ledger_occupy")
	qCompensationInsert  = sqlfile.Must(sqlFiles, "compensation_insert")
	qControlGet          = sqlfile.Must(sqlFiles, "control_get")
	qStockLock           = sqlfile.Must(sqlFiles, "stock_lock")
	qStockOccupyMany     = sqlfile.Must(sqlFiles, "stock_occupy_many")
	qOrderWithdraw       = sqlfile.Must(sqlFiles, "order_withdraw")
)
