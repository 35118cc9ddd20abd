package testsale

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// BuyerClient keeps its connections: thousands of buyers, few sockets.
var BuyerClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}

// PostAsDevUser posts one reservation to a gateway running with
// -insecure-dev-users, as user, and returns the answer's code and
// reservation id ("" when the request itself failed).
func PostAsDevUser(base string, activity, sku, user int64, requestID string) (string, string) {
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/activities/%d/skus/%d/reservations", base, activity, sku),
		strings.NewReader(`{"request_id":"`+requestID+`"}`))
	req.Header.Set("X-User-ID", strconv.FormatInt(user, 10))
	req.Header.Set("Content-Type", "application/json")
	resp, err := BuyerClient.Do(req)
	if err != nil {
		return "", ""
	}
	defer resp.Body.Close()
	var a struct {
		Code string `json:"code"`
		RID  string `json:"reservation_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&a)
	return a.Code, a.RID
}
