-- Headless Neovim with the plugin (editors/nvim) and `recaptureOnSave = true`, for what
-- issue 30 says of failures: capture a Torch model (:TensorVizOpen), break a line of a
-- block's forward and :write (the recapture fails: the error sits on the line that
-- raised, a hint on the model's class points at it), put the line back and :write (that
-- save recaptures, though the text is the one last captured, and the error goes).
-- Results go to $TV_OUT.
local out_path = assert(os.getenv("TV_OUT"))
local ws = assert(os.getenv("TV_WS"))
local cmd = vim.json.decode(assert(os.getenv("TV_CMD")))
vim.opt.rtp:prepend(assert(os.getenv("TV_PLUGIN")))
local result = { messages = {}, logs = {} }

local function finish(err)
  result.error = err
  for _, c in ipairs(vim.lsp.get_clients()) do c:stop() end
  vim.wait(5000, function() return #vim.lsp.get_clients() == 0 end, 50)
  local tmp = out_path .. ".tmp"
  local fh = assert(io.open(tmp, "w"))
  fh:write(vim.json.encode(result))
  fh:close()
  os.rename(tmp, out_path)
  vim.cmd("qall!")
end

local function diags(bufnr)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    local lsp = (d.user_data or {}).lsp or {}
    local related = vim.tbl_map(function(r) return r.message end, lsp.relatedInformation or {})
    table.insert(out, { line = d.lnum, severity = d.severity, message = d.message, code = d.code, related = related })
  end
  table.sort(out, function(a, b) return a.line < b.line end)
  return out
end

local function logged(text)
  return #vim.tbl_filter(function(m) return m:find(text, 1, true) ~= nil end, result.logs)
end

local ok, err = pcall(function()
  vim.ui.open = function(url)
    result.url = result.url or url
    return { wait = function() return { code = 0 } end }, nil
  end
  vim.notify = function() end
  vim.lsp.handlers["window/showMessage"] = function(_, params) table.insert(result.messages, params.message) end
  vim.lsp.handlers["window/logMessage"] = function(_, params) table.insert(result.logs, params.message) end
  vim.cmd("filetype on")
  require("tensorviz").setup({ cmd = cmd, settings = { recaptureOnSave = true, captureTimeout = 120 }, keymaps = false })

  vim.cmd.edit(ws .. "/stack.py")
  local bufnr = vim.api.nvim_get_current_buf()
  assert(vim.wait(60000, function()
    local c = vim.lsp.get_clients({ name = "tensorviz", bufnr = bufnr })[1]
    return c ~= nil and c.initialized
  end, 50), "the plugin did not start the server")
  vim.cmd("TensorVizTrust")
  assert(vim.wait(30000, function()
    return vim.iter(result.messages):any(function(m) return m:find("is trusted", 1, true) ~= nil end)
  end, 50), "TensorVizTrust said nothing")

  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  local class_line = assert(vim.iter(ipairs(lines)):find(function(_, l) return l:find("^class Stack") end))
  vim.api.nvim_win_set_cursor(0, { class_line, 0 })
  vim.cmd("TensorVizOpen")
  assert(vim.wait(150000, function() return result.url ~= nil end, 100), "the first capture opened nothing")
  assert(vim.wait(10000, function() return logged("captured Stack:") == 1 end, 50), "the first capture was not logged")

  -- Break the block's forward and save: the recapture fails.
  local good = table.concat(lines, "\n")
  local raising = assert(vim.iter(ipairs(lines)):find(function(_, l) return l:find("h = self.fc(x)", 1, true) end))
  result.raising_line = raising - 1
  vim.api.nvim_buf_set_lines(bufnr, raising - 1, raising, false, { "        h = self.fc(x) @ torch.ones(5, 2)" })
  vim.cmd("write")
  assert(vim.wait(120000, function()
    return vim.iter(vim.diagnostic.get(bufnr)):any(function(d)
      return d.severity == vim.diagnostic.severity.ERROR
    end)
  end, 100), "the failed recapture gave no error diagnostic: " .. vim.inspect(result.logs))
  result.failed = diags(bufnr)

  -- Put the line back and save: the save recaptures, the error goes.
  vim.api.nvim_buf_set_lines(bufnr, raising - 1, raising, false, { lines[raising] })
  assert(table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n") == good)
  vim.cmd("write")
  assert(vim.wait(120000, function() return logged("captured Stack:") == 2 end, 100),
    "fixing the failed recapture did not recapture: " .. vim.inspect(result.logs))
  assert(vim.wait(30000, function() return #vim.diagnostic.get(bufnr) == 0 end, 100),
    "the failure stayed after the recapture: " .. vim.inspect(diags(bufnr)))
  result.recaptures = logged("recapturing Stack")
end)
finish(not ok and tostring(err) or nil)
